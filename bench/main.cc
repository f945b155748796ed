// One binary, one run: every scenario over every adapter.
#include <benchmark/benchmark.h>
#include <stdio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <string>

int main(int argc, char **argv) {
  utsname u;
  if (uname(&u) == 0) benchmark::AddCustomContext("kernel", u.release);
  benchmark::AddCustomContext("online_cpus",
                              std::to_string(sysconf(_SC_NPROCESSORS_ONLN)));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
