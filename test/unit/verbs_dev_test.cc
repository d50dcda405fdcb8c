// Verbs rails without verbs: BRAID_IB_HCA parsing and matching (NCCL_IB_HCA semantics), the
// port speed table and the RoCE GID ranking.
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "transport/verbs/verbs_dev.h"
}

namespace {

struct braid_hca_spec Parse(const char *text) {
  struct braid_hca_spec s;
  char why[256] = "";
  EXPECT_EQ(0, braid_hca_parse(text, &s, why, sizeof why)) << (text ? text : "(null)") << ": " << why;
  return s;
}

std::string Rejected(const char *text) {
  struct braid_hca_spec s;
  char why[256] = "";
  EXPECT_EQ(-1, braid_hca_parse(text, &s, why, sizeof why)) << text << " was accepted";
  EXPECT_NE('\0', why[0]) << text << " rejected without a reason";
  return why;
}

struct MatchCase {
  const char *spec;
  const char *dev;
  int port;
  bool match;
};

TEST(HcaSpec, MatchesLikeNccl) {
  const MatchCase cases[] = {
      // No filter: everything.
      {nullptr, "mlx5_0", 1, true},
      {"", "mlx5_0", 2, true},
      {"   ", "rxe_a0", 1, true},
      {",", "mlx5_0", 1, true},
      // Prefixes.
      {"mlx5", "mlx5_0", 1, true},
      {"mlx5", "mlx5_10", 2, true},
      {"mlx5", "mlx4_0", 1, false},
      {"mlx5_1", "mlx5_1", 1, true},
      {"mlx5_1", "mlx5_10", 1, true},  // a prefix, as in NCCL
      {"mlx5_1", "mlx5_2", 1, false},
      {"mlx5_1", "mlx5_", 1, false},   // the name is shorter than the prefix
      {"lx5", "mlx5_0", 1, false},     // prefix, not substring
      {"mlx5_0,mlx5_3", "mlx5_3", 1, true},
      {"mlx5_0,mlx5_3", "mlx5_2", 1, false},
      // Exact names.
      {"=mlx5_1", "mlx5_1", 1, true},
      {"=mlx5_1", "mlx5_10", 1, false},
      {"=mlx5_1", "mlx5_", 1, false},
      {"=mlx5_0,mlx5_1", "mlx5_1", 2, true},
      // Excludes.
      {"^mlx5_1", "mlx5_1", 1, false},
      {"^mlx5_1", "mlx5_10", 1, false},  // prefix exclusion
      {"^mlx5_1", "mlx5_0", 1, true},
      {"^rxe_b", "rxe_a3", 1, true},
      {"^rxe_b", "rxe_b0", 1, false},
      {"^=mlx5_1", "mlx5_1", 1, false},
      {"^=mlx5_1", "mlx5_10", 1, true},
      {"^mlx5_0,mlx5_1", "mlx5_2", 1, true},
      {"^mlx5_0,mlx5_1", "mlx5_1", 1, false},
      // Ports.
      {"mlx5_0:1", "mlx5_0", 1, true},
      {"mlx5_0:1", "mlx5_0", 2, false},
      {"mlx5_0:1,mlx5_1:1", "mlx5_1", 1, true},
      {"mlx5_0:1,mlx5_1:1", "mlx5_1", 2, false},
      {"mlx5_0:2,mlx5_0", "mlx5_0", 1, true},   // the second entry takes every port
      {"mlx5:2", "mlx5_7", 2, true},            // a prefix with a port
      {"=rxe_a0:1", "rxe_a0", 1, true},
      {"=rxe_a0:1", "rxe_a01", 1, false},
      {"^mlx5_0:1", "mlx5_0", 1, false},        // only port 1 is excluded
      {"^mlx5_0:1", "mlx5_0", 2, true},
      {"^=mlx5_0:2", "mlx5_0", 2, false},
      {"^=mlx5_0:2", "mlx5_0", 1, true},
      // Spaces around entries, ports and the list are ignored (NCCL would keep them in the name).
      {" mlx5_0 , mlx5_1 ", "mlx5_1", 1, true},
      {" mlx5_0 , mlx5_1 ", "mlx5_2", 1, false},
      {"mlx5_0 : 1", "mlx5_0", 1, true},
      {"mlx5_0 : 1", "mlx5_0", 2, false},
      {"  ^mlx5_0", "mlx5_0", 1, false},
      {"\t=mlx5_0\n", "mlx5_0", 1, true},
      // Empty entries are skipped.
      {"mlx5_0,,mlx5_1,", "mlx5_1", 1, true},
      {",mlx5_0", "mlx5_0", 1, true},
      {",mlx5_0", "mlx5_2", 1, false},
  };
  for (const MatchCase &c : cases) {
    struct braid_hca_spec s = Parse(c.spec);
    EXPECT_EQ(c.match, braid_hca_match(&s, c.dev, c.port))
        << "spec \"" << (c.spec ? c.spec : "(null)") << "\" device " << c.dev << ":" << c.port;
  }
}

TEST(HcaSpec, ParsedFields) {
  struct braid_hca_spec s = Parse("^=mlx5_0:1, mlx5_1 ,mlx5_2:255");
  EXPECT_TRUE(s.exclude);
  EXPECT_TRUE(s.exact);
  ASSERT_EQ(3, s.n);
  EXPECT_STREQ("mlx5_0", s.entry[0].name);
  EXPECT_EQ(1, s.entry[0].port);
  EXPECT_STREQ("mlx5_1", s.entry[1].name);
  EXPECT_EQ(0, s.entry[1].port);
  EXPECT_EQ(255, s.entry[2].port);

  s = Parse("");
  EXPECT_FALSE(s.exclude);
  EXPECT_FALSE(s.exact);
  EXPECT_EQ(0, s.n);

  // find names the entry (for "entry X matches nothing" warnings), ignoring '^'.
  s = Parse("^mlx5_0,mlx5_1:2");
  EXPECT_EQ(0, braid_hca_find(&s, "mlx5_0", 1));
  EXPECT_EQ(1, braid_hca_find(&s, "mlx5_1", 2));
  EXPECT_EQ(-1, braid_hca_find(&s, "mlx5_1", 1));
  EXPECT_EQ(-1, braid_hca_find(&s, "rxe_a0", 1));
}

TEST(HcaSpec, BadInputRejectedWithReason) {
  EXPECT_NE(std::string::npos, Rejected("mlx5_0:x").find("mlx5_0:x"));
  EXPECT_NE(std::string::npos, Rejected("mlx5_0:x").find("port"));
  EXPECT_NE(std::string::npos, Rejected(":1").find("no device name"));
  EXPECT_NE(std::string::npos, Rejected("mlx5_0,:1").find("\":1\""));
  EXPECT_NE(std::string::npos, Rejected("mlx5_0:").find("no port"));
  EXPECT_NE(std::string::npos, Rejected("mlx5_0: ").find("no port"));
  EXPECT_NE(std::string::npos, Rejected("mlx5_0:0").find("port 0"));
  Rejected("mlx5_0:256");
  Rejected("mlx5_0:99999999999");
  Rejected("mlx5_0:-1");
  Rejected("mlx5_0:1:2");
  Rejected("mlx5_0:1x");
  EXPECT_NE(std::string::npos, Rejected("mlx5 0").find("space"));
  EXPECT_NE(std::string::npos, Rejected("mlx5_0,^mlx5_1").find("'^'"));
  Rejected("mlx5_0,=mlx5_1");
  Rejected("^^mlx5_0");
  Rejected("=^mlx5_0");
  EXPECT_NE(std::string::npos, Rejected("^").find("no device names"));
  Rejected("=");
  Rejected("^=");
  Rejected("^ , ");
  std::string long_name(64, 'm');
  EXPECT_NE(std::string::npos, Rejected(long_name.c_str()).find("63"));
  std::string many;
  for (int i = 0; i <= BRAID_HCA_MAX; i++) many += "mlx5_" + std::to_string(i) + ",";
  EXPECT_NE(std::string::npos, Rejected(many.c_str()).find("entries"));
  // The longest accepted ones.
  Parse(std::string(63, 'm').c_str());
  many.clear();
  for (int i = 0; i < BRAID_HCA_MAX; i++) many += "mlx5_" + std::to_string(i) + ",";
  EXPECT_EQ(BRAID_HCA_MAX, Parse(many.c_str()).n);
}

TEST(VerbsSpeed, Table) {
  // active_width: 1 1x, 2 4x, 4 8x, 8 12x, 16 2x.  active_speed: 1 SDR, 2 DDR, 4 QDR, 8 FDR10,
  // 16 FDR, 32 EDR, 64 HDR, 128 NDR, 256 XDR.
  EXPECT_EQ(2500, braid_verbs_speed_mbps(1, 1));
  EXPECT_EQ(10000, braid_verbs_speed_mbps(2, 1));     // 4x SDR
  EXPECT_EQ(20000, braid_verbs_speed_mbps(2, 2));     // 4x DDR
  EXPECT_EQ(40000, braid_verbs_speed_mbps(2, 4));     // 4x QDR
  EXPECT_EQ(10000, braid_verbs_speed_mbps(1, 8));     // 1x FDR10 (soft-RoCE on a 10G link)
  EXPECT_EQ(56000, braid_verbs_speed_mbps(2, 16));    // 4x FDR
  EXPECT_EQ(100000, braid_verbs_speed_mbps(2, 32));   // 4x EDR
  EXPECT_EQ(200000, braid_verbs_speed_mbps(2, 64));   // 4x HDR
  EXPECT_EQ(400000, braid_verbs_speed_mbps(2, 128));  // 4x NDR
  EXPECT_EQ(800000, braid_verbs_speed_mbps(2, 256));  // 4x XDR
  EXPECT_EQ(100000, braid_verbs_speed_mbps(16, 64));  // 2x HDR
  EXPECT_EQ(600000, braid_verbs_speed_mbps(8, 64));   // 12x HDR
  EXPECT_EQ(400000, braid_verbs_speed_mbps(4, 64));   // 8x HDR
  EXPECT_EQ(25000, braid_verbs_speed_mbps(1, 32));    // 1x EDR
  // Several bits set: the lowest counts, as in NCCL.
  EXPECT_EQ(10000, braid_verbs_speed_mbps(1 | 2, 4 | 8));
  // Unknown codes.
  EXPECT_EQ(0, braid_verbs_speed_mbps(0, 32));
  EXPECT_EQ(0, braid_verbs_speed_mbps(2, 0));
  EXPECT_EQ(0, braid_verbs_speed_mbps(32, 32));
  EXPECT_EQ(0, braid_verbs_speed_mbps(2, 512));
}

TEST(VerbsGid, Rank) {
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 88, 0, 1};
  const uint8_t link_local[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  const uint8_t global6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const uint8_t zero[16] = {};
  EXPECT_EQ(2, braid_verbs_gid_rank(v4, 2));
  EXPECT_EQ(1, braid_verbs_gid_rank(global6, 2));
  EXPECT_EQ(0, braid_verbs_gid_rank(link_local, 2));
  EXPECT_EQ(0, braid_verbs_gid_rank(v4, 1));
  EXPECT_EQ(0, braid_verbs_gid_rank(global6, 1));
  EXPECT_EQ(0, braid_verbs_gid_rank(v4, 0));
  EXPECT_EQ(0, braid_verbs_gid_rank(zero, 2));

  char text[64];
  braid_verbs_gid_str(v4, text, sizeof text);
  EXPECT_STREQ("::ffff:10.88.0.1", text);
  braid_verbs_gid_str(global6, text, sizeof text);
  EXPECT_STREQ("2001:db8::1", text);
  EXPECT_STREQ("Ethernet", braid_verbs_link_name(BRAID_LINK_ETH));
  EXPECT_STREQ("InfiniBand", braid_verbs_link_name(BRAID_LINK_IB));
}

}  // namespace
