#include <gtest/gtest.h>

#include "gdaki/device/datapath.hpp"

TEST(smoke, builds) { EXPECT_EQ(gdaki::dev::wqebbs_rdma(1), 1u); }
