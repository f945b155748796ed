// Replays fuzzer inputs through the segment fuzzer (segment_fuzz.cc) without
// libFuzzer, so that ctest runs every past finding (tests/fuzz/regressions/)
// in the tests' builds, the normal one and the sanitizer one, with the
// compiler they use: shmsem_fuzz_replay FILE|DIR...
//
// Each file (a directory: each regular file in it, in name order) is read
// whole and given to LLVMFuzzerTestOneInput once, after one
// LLVMFuzzerInitialize, as libFuzzer does when it runs a corpus. A finding
// fails as it does under the fuzzer: the harness aborts with the check's
// message, or a sanitizer reports. Exits 1 if an argument names nothing to
// replay (a regression directory gone empty would pass unnoticed).
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

bool is_regular(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The files an argument names: itself, or a directory's regular files.
std::vector<std::string> inputs_of(const std::string &arg) {
  std::vector<std::string> files;
  if (DIR *d = opendir(arg.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string path = arg + "/" + e->d_name;
      if (e->d_name[0] != '.' && is_regular(path)) files.push_back(path);
    }
    closedir(d);
    std::sort(files.begin(), files.end());
  } else if (is_regular(arg)) {
    files.push_back(arg);
  }
  return files;
}

bool read_file(const std::string &path, std::vector<uint8_t> *out) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) return false;
  uint8_t buf[65536];
  size_t n;
  out->clear();
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    out->insert(out->end(), buf, buf + n);
  bool ok = !ferror(f);
  fclose(f);
  return ok;
}

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: shmsem_fuzz_replay FILE|DIR...\n");
    return 2;
  }
  LLVMFuzzerInitialize(&argc, &argv);
  size_t replayed = 0;
  for (int i = 1; i < argc; i++) {
    std::vector<std::string> files = inputs_of(argv[i]);
    if (files.empty()) {
      fprintf(stderr, "shmsem_fuzz_replay: no input in %s\n", argv[i]);
      return 1;
    }
    for (const std::string &path : files) {
      std::vector<uint8_t> data;
      if (!read_file(path, &data)) {
        fprintf(stderr, "shmsem_fuzz_replay: cannot read %s\n", path.c_str());
        return 1;
      }
      // Named before it runs: an abort is then attributed to its input.
      printf("replay %s (%zu bytes)\n", path.c_str(), data.size());
      fflush(stdout);
      // A copy of exactly its size, as libFuzzer passes it: a read past the
      // end is then past the allocation, where ASan sees it.
      std::unique_ptr<uint8_t[]> copy(new uint8_t[data.size()]);
      std::copy(data.begin(), data.end(), copy.get());
      double t0 = now_ms();
      LLVMFuzzerTestOneInput(copy.get(), data.size());
      printf("  ok in %.1f ms\n", now_ms() - t0);
      replayed++;
    }
  }
  printf("shmsem_fuzz_replay: %zu input(s), no finding\n", replayed);
  return 0;
}
