// main.cc: the strata executable's entry (apps/strata_main.h).
#include "apps/strata_main.h"

int main(int argc, char** argv) { return strata::Main(argc, argv); }
