// Interface selection: NCCL_SOCKET_IFNAME-style matching and braid_ifaces_select.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

extern "C" {
#include "topo/ifaces.h"
}

namespace {

struct MatchCase {
  const char *spec;
  const char *name;
  bool match;
};

TEST(IfnameMatch, Table) {
  const MatchCase cases[] = {
      // Empty (or absent) spec matches everything.
      {"", "eth0", true},
      {"", "lo", true},
      {nullptr, "ib0", true},
      // Prefix list.
      {"eth", "eth0", true},
      {"eth", "eth10", true},
      {"eth", "eth", true},
      {"eth", "ib0", false},
      {"eth", "et", false},
      {"eth", "veth0", false},  // prefix, not substring
      {"eth0", "eth0", true},
      {"eth0", "eth01", true},  // still a prefix
      {"eth0", "eth1", false},
      {"eth,ib", "eth0", true},
      {"eth,ib", "ib0", true},
      {"eth,ib", "ibp12s0", true},
      {"eth,ib", "lo", false},
      {"eth,ib", "enp1s0", false},
      // Exclude list.
      {"^eth", "eth0", false},
      {"^eth", "ib0", true},
      {"^eth", "lo", true},
      {"^eth,ib", "eth0", false},
      {"^eth,ib", "ib1", false},
      {"^eth,ib", "enp1s0", true},
      {"^docker,lo", "docker0", false},
      {"^docker,lo", "lo", false},
      {"^docker,lo", "eth0", true},
      // Exact names.
      {"=eth0", "eth0", true},
      {"=eth0", "eth01", false},
      {"=eth0", "eth", false},
      {"=eth0", "eth1", false},
      {"=eth0,ib0", "ib0", true},
      {"=eth0,ib0", "ib01", false},
      {"=eth0,ib0", "eth0", true},
      // Exact excludes.
      {"^=eth0", "eth0", false},
      {"^=eth0", "eth01", true},
      {"^=eth0", "eth1", true},
      {"^=eth0", "ib0", true},
      {"^=eth0,eth1", "eth1", false},
      {"^=eth0,eth1", "eth2", true},
      // Trailing and doubled commas are harmless; an empty entry matches nothing.
      {"eth,", "eth0", true},
      {"eth,", "ib0", false},
      {"eth,,ib", "ib0", true},
      {"eth,,ib", "eth0", true},
      {"eth,,ib", "lo", false},
      {",eth", "eth3", true},
      {",eth", "lo", false},
      {"^eth,", "ib0", true},
      {"^eth,", "eth0", false},
      {"^eth,,ib", "ib0", false},
      {"^eth,,ib", "lo", true},
      {"=eth0,", "eth0", true},
      {"=eth0,", "eth00", false},
      {"=eth0,,ib0", "ib0", true},
      {"^=eth0,", "eth0", false},
      {"^=eth0,", "lo", true},
  };
  for (const MatchCase &c : cases) {
    EXPECT_EQ(c.match, braid_ifname_match(c.spec, c.name))
        << "spec \"" << (c.spec ? c.spec : "(null)") << "\" name \"" << c.name << "\"";
  }
}

// Names of the interfaces that are up and have an address of `fam` (AF_UNSPEC: any IP family).
std::set<std::string> UpInterfaces(int fam, bool loopback) {
  std::set<std::string> names;
  ifaddrs *list = nullptr;
  if (getifaddrs(&list) != 0) return names;
  for (ifaddrs *a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP)) continue;
    int f = a->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6) continue;
    if (fam != AF_UNSPEC && f != fam) continue;
    if (((a->ifa_flags & IFF_LOOPBACK) != 0) != loopback) continue;
    names.insert(a->ifa_name);
  }
  freeifaddrs(list);
  return names;
}

std::string LoopbackName() {
  std::set<std::string> lo = UpInterfaces(AF_INET, true);
  return lo.empty() ? "" : *lo.begin();
}

std::string AddrString(const braid_iface &i) {
  char buf[128];
  return braid_sockaddr_str(reinterpret_cast<const sockaddr *>(&i.addr), buf, sizeof buf);
}

TEST(IfacesSelect, LoopbackBySpec) {
  const std::string lo = LoopbackName();
  if (lo != "lo") GTEST_SKIP() << "no IPv4 loopback interface named lo here";
  braid_iface out[BRAID_MAX_IFACES];
  memset(out, 0xcc, sizeof out);
  int n = braid_ifaces_select("lo", "", out, BRAID_MAX_IFACES);
  ASSERT_GE(n, 1);
  // "lo" is a prefix: it may also match a non-loopback "lo..." interface, but the loopback
  // device must be among the results, with its IPv4 address.
  int found = -1;
  for (int i = 0; i < n; i++) {
    EXPECT_EQ(0, strncmp(out[i].name, "lo", 2)) << out[i].name;
    if (!strcmp(out[i].name, "lo")) found = i;
  }
  ASSERT_GE(found, 0);
  const braid_iface &l = out[found];
  EXPECT_TRUE(l.loopback);
  ASSERT_EQ(AF_INET, l.addr.ss_family) << "IPv4 is preferred when no family is given";
  EXPECT_EQ((socklen_t)sizeof(sockaddr_in), l.addrlen);
  const auto *s = reinterpret_cast<const sockaddr_in *>(&l.addr);
  char ip[INET_ADDRSTRLEN];
  ASSERT_NE(nullptr, inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip));
  EXPECT_STREQ("127.0.0.1", ip);
  EXPECT_EQ(0, s->sin_port) << "interface addresses carry port 0";
  EXPECT_EQ((int)if_nametoindex("lo"), l.ifindex);
  EXPECT_GT(l.ifindex, 0);
  EXPECT_EQ("127.0.0.1:0", AddrString(l));
}

TEST(IfacesSelect, ExactLoopbackIPv4) {
  if (LoopbackName() != "lo") GTEST_SKIP() << "no IPv4 loopback interface named lo here";
  braid_iface out[BRAID_MAX_IFACES];
  int n = braid_ifaces_select("=lo", "AF_INET", out, BRAID_MAX_IFACES);
  ASSERT_EQ(1, n);
  EXPECT_STREQ("lo", out[0].name);
  EXPECT_TRUE(out[0].loopback);
  EXPECT_EQ(AF_INET, out[0].addr.ss_family);
}

TEST(IfacesSelect, ExactLoopbackIPv6) {
  if (UpInterfaces(AF_INET6, true).count("lo") == 0) GTEST_SKIP() << "no IPv6 on lo";
  braid_iface out[BRAID_MAX_IFACES];
  int n = braid_ifaces_select("=lo", "AF_INET6", out, BRAID_MAX_IFACES);
  ASSERT_EQ(1, n);
  EXPECT_STREQ("lo", out[0].name);
  ASSERT_EQ(AF_INET6, out[0].addr.ss_family);
  EXPECT_EQ((socklen_t)sizeof(sockaddr_in6), out[0].addrlen);
  const auto *s = reinterpret_cast<const sockaddr_in6 *>(&out[0].addr);
  EXPECT_TRUE(IN6_IS_ADDR_LOOPBACK(&s->sin6_addr)) << AddrString(out[0]);
  EXPECT_EQ("[::1]:0", AddrString(out[0]));
}

TEST(IfacesSelect, ImpossibleSpecSelectsNothing) {
  braid_iface out[BRAID_MAX_IFACES];
  EXPECT_EQ(0, braid_ifaces_select("braid_no_such_if", "", out, BRAID_MAX_IFACES));
  EXPECT_EQ(0, braid_ifaces_select("=braid_no_such_if", "AF_INET", out, BRAID_MAX_IFACES));
  EXPECT_EQ(0, braid_ifaces_select("braid_no_such_if", "AF_INET6", out, BRAID_MAX_IFACES));
  // "=lo" with a suffix is not "lo".
  EXPECT_EQ(0, braid_ifaces_select("=lo0x", "", out, BRAID_MAX_IFACES));
}

TEST(IfacesSelect, InvalidFamilyIsAnError) {
  braid_iface out[BRAID_MAX_IFACES];
  EXPECT_EQ(-1, braid_ifaces_select("", "AF_BOGUS", out, BRAID_MAX_IFACES));
  EXPECT_EQ(-1, braid_ifaces_select("lo", "AF_BOGUS", out, BRAID_MAX_IFACES));
  EXPECT_EQ(-1, braid_ifaces_select("lo", "af_inet", out, BRAID_MAX_IFACES));
  EXPECT_EQ(-1, braid_ifaces_select("lo", "AF_INET4", out, BRAID_MAX_IFACES));
}

TEST(IfacesSelect, FamilyIsHonoured) {
  for (const char *fam : {"AF_INET", "AF_INET6"}) {
    const int want = strcmp(fam, "AF_INET") ? AF_INET6 : AF_INET;
    braid_iface out[BRAID_MAX_IFACES];
    int n = braid_ifaces_select("", fam, out, BRAID_MAX_IFACES);
    ASSERT_GE(n, 0);
    if (UpInterfaces(want, false).empty() && UpInterfaces(want, true).empty()) continue;
    for (int i = 0; i < n; i++) {
      EXPECT_EQ(want, out[i].addr.ss_family) << fam << " " << out[i].name;
      if (want == AF_INET6) {
        const auto *s = reinterpret_cast<const sockaddr_in6 *>(&out[i].addr);
        EXPECT_FALSE(IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr))
            << "link-local address selected on " << out[i].name;
      }
    }
  }
}

TEST(IfacesSelect, DefaultSkipsLoopbackAndVirtualBridgesWhenARealNicExists) {
  braid_iface out[BRAID_MAX_IFACES];
  int n = braid_ifaces_select("", "", out, BRAID_MAX_IFACES);
  ASSERT_GE(n, 1) << "default selection must fall back to loopback at worst";
  std::set<std::string> names;
  for (int i = 0; i < n; i++) {
    EXPECT_TRUE(names.insert(out[i].name).second) << "interface listed twice: " << out[i].name;
    EXPECT_NE(0, strncmp(out[i].name, "docker", 6)) << out[i].name;
    EXPECT_NE(0, strncmp(out[i].name, "virbr", 5)) << out[i].name;
  }
  bool have_real = false;
  for (const std::string &name : UpInterfaces(AF_UNSPEC, false)) {
    if (name.compare(0, 2, "lo") && name.compare(0, 6, "docker") && name.compare(0, 5, "virbr"))
      have_real = true;
  }
  for (int i = 0; i < n; i++) {
    if (have_real) {
      EXPECT_FALSE(out[i].loopback) << out[i].name;
    } else {
      EXPECT_TRUE(out[i].loopback) << out[i].name;
    }
  }
}

TEST(IfacesSelect, OrderIsStableAcrossCalls) {
  for (const char *spec : {"", "lo", "^docker"}) {
    braid_iface a[BRAID_MAX_IFACES], b[BRAID_MAX_IFACES];
    int na = braid_ifaces_select(spec, "", a, BRAID_MAX_IFACES);
    int nb = braid_ifaces_select(spec, "", b, BRAID_MAX_IFACES);
    ASSERT_EQ(na, nb) << spec;
    for (int i = 0; i < na; i++) {
      EXPECT_STREQ(a[i].name, b[i].name) << spec << " #" << i;
      EXPECT_EQ(a[i].ifindex, b[i].ifindex);
      EXPECT_EQ(a[i].addrlen, b[i].addrlen);
      EXPECT_EQ(0, memcmp(&a[i].addr, &b[i].addr, a[i].addrlen)) << spec << " #" << i;
    }
  }
}

TEST(IfacesSelect, ExplicitSpecListsRealNicsBeforeLoopback) {
  braid_iface out[BRAID_MAX_IFACES];
  int n = braid_ifaces_select("^docker,virbr", "", out, BRAID_MAX_IFACES);
  ASSERT_GE(n, 1);
  bool seen_loopback = false;
  for (int i = 0; i < n; i++) {
    if (out[i].loopback) {
      seen_loopback = true;
    } else {
      EXPECT_FALSE(seen_loopback) << out[i].name << " listed after a loopback interface";
    }
  }
}

TEST(IfacesSelect, RespectsMax) {
  braid_iface out[2];
  memset(out, 0, sizeof out);
  int n = braid_ifaces_select("", "", out, 1);
  EXPECT_EQ(1, n);
  // The second slot is untouched.
  braid_iface zero;
  memset(&zero, 0, sizeof zero);
  EXPECT_EQ(0, memcmp(&out[1], &zero, sizeof zero));
  EXPECT_EQ(0, braid_ifaces_select("", "", out, 0));
}

TEST(SockaddrStr, FormatsBothFamilies) {
  char buf[80];
  sockaddr_in s4{};
  s4.sin_family = AF_INET;
  s4.sin_port = htons(8080);
  inet_pton(AF_INET, "10.2.3.4", &s4.sin_addr);
  EXPECT_STREQ("10.2.3.4:8080", braid_sockaddr_str(reinterpret_cast<sockaddr *>(&s4), buf, sizeof buf));
  sockaddr_in6 s6{};
  s6.sin6_family = AF_INET6;
  s6.sin6_port = htons(443);
  inet_pton(AF_INET6, "fd00::2", &s6.sin6_addr);
  EXPECT_STREQ("[fd00::2]:443", braid_sockaddr_str(reinterpret_cast<sockaddr *>(&s6), buf, sizeof buf));
}

}  // namespace
