// Exit codes of the shmsem command, defined here and nowhere else. shmsem(1)
// (man/shmsem.1, EXIT STATUS) and docs/CLI.md document the same table; keep
// the three in step.
//
// | code  | meaning                                                        |
// |-------|----------------------------------------------------------------|
// | 0     | success                                                        |
// | 1     | the operation failed (permission, closed, system error, ...)   |
// | 2     | bad command line: unknown option, invalid name, duration,      |
// |       | rate or number (not decimal digits, or out of range), options  |
// |       | that do not fit, `set` above --max-permits                     |
// | 3     | no such semaphore                                              |
// | 4     | the semaphore exists (create --exclusive, or other settings)   |
//
// `shmsem run` exits with the command's own status instead, and reserves the
// codes timeout(1) and env(1) use, so scripts can tell them apart:
//
// | code  | meaning                                                        |
// |-------|----------------------------------------------------------------|
// | 124   | no permit before --timeout; the command was not run            |
// | 125   | shmsem run itself failed (any of 1-4 above); command not run   |
// | 126   | the command was found but could not be executed               |
// | 127   | the command was not found                                      |
// | 128+n | the command (or the wait for a permit) was ended by signal n  |
#ifndef SHMSEM_TOOLS_EXIT_CODES_H
#define SHMSEM_TOOLS_EXIT_CODES_H

namespace shmsem::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,
  kExitNoSuchSemaphore = 3,
  kExitExists = 4,

  kExitRunTimedOut = 124,
  kExitRunFailed = 125,
  kExitRunCannotExecute = 126,
  kExitRunNotFound = 127,
  kExitRunSignalBase = 128,
};

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_EXIT_CODES_H
