// strata: the command line. Replaced by the full CLI (info) in this change.
#include <cstdio>
int main() {
  std::puts("strata: usage: strata info");
  return 0;
}
