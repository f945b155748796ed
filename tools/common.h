// Helpers every subcommand shares: semaphore-name, number and duration
// parsing, reporting library errors in plain words, mapping them to exit
// codes, and reading a process's name from /proc.
#ifndef SHMSEM_TOOLS_COMMON_H
#define SHMSEM_TOOLS_COMMON_H

#include <stdint.h>
#include <sys/types.h>

#include <stdio.h>

#include <string>
#include <vector>

#include <shmsem/shmsem.h>

namespace shmsem::cli {

// "" if `name` is a valid semaphore name, else the whole message, e.g.
// "invalid semaphore name '/a/b': must be '/' followed by 1-255 characters
// without '/'". Same rule as the library (see shmsem_create(3)).
std::string name_problem(const std::string &name);
// redis:// or redis+unix:// (any case): a semaphore on a Redis server.
bool is_remote_name(const std::string &name);

// Where the semaphores of this host are.
inline constexpr char kShmPlace[] = "/dev/shm";
// A place that keeps semaphores, not one semaphore: /dev/shm, or a server
// without a pool ("redis://HOST[:PORT]", "redis+unix:///PATH"), as
// shmsem_list_at(3) takes it.
bool is_place(const std::string &arg);
// name_problem(), but a place is no problem (`top`, `exporter`).
std::string name_or_place_problem(const std::string &arg);

// `text` made safe to print on a terminal: valid UTF-8 stays as it is;
// every control character (C0, DEL, C1), every byte of invalid UTF-8 and the
// backslash itself become \xNN (backslash: \\), as `ls -b` does. Names in
// /dev/shm, command lines and comm are chosen by other users, and a name
// with an escape sequence in it must not repaint the operator's terminal.
std::string printable(const std::string &text);
// printable(name) as one word of a suggested command line: as it is when
// only letters, digits and /_.:+=@%,- are in it, else in double quotes
// (\, ", $ and ` escaped), so that a redis+unix name's '?' is not a glob.
std::string command_word(const std::string &name);

// Parse a whole number written in decimal digits, `min` to `max`: the one
// reader of every numeric option (through decimal() in commands.h for those
// CLI11 parses). "010" is ten, as a script that zero-pads means it; "0x10",
// "1e3", "2abc", "+5", " 5" and "" are not numbers (C's strtoul with base 0,
// which CLI11 uses, would read the first two as 16 and 8). Returns "" and
// sets *out, or what is wrong, beginning with the text as given:
// "'1e3' is not a number: give a whole number in decimal digits, 0 to
// 1048576" or "2000000 is out of range: give 0 to 1048576" (a number with a
// minus sign is out of range too). The text is quoted as given: print the
// message through printable().
std::string parse_decimal(const std::string &text, uint64_t min, uint64_t max,
                          uint64_t *out);

// Parse "500ms", "5s", "2m", "1h", "1.5s" or plain seconds ("5", "0.25").
// Returns "" and sets *ns, or returns what is wrong with `text`.
std::string parse_duration(const std::string &text, uint64_t *ns);

// 950ns, 12µs, 3.4ms, 1.25s, 2m05s, 3h07m: short and human.
std::string format_duration(uint64_t ns);

// Parse a rate limit: COUNT[/[K]UNIT], at most COUNT acquisitions per K
// units (K defaults to 1), UNIT one of ms, s, min, h; a plain COUNT is per
// second ("100/s", "5/min", "1/h", "250/ms", "3/10s", "20"). Checks what
// shmsem_create(3) checks: COUNT >= 1 and an interval (period / COUNT) of
// 1 ns to one day. Returns "" and sets *count and *period_ns, or returns
// what is wrong with `text`.
std::string parse_rate(const std::string &text, uint32_t *count,
                       uint64_t *period_ns);

// A rate as parse_rate() reads it: "100/s", "5/min", "3/10s"; a period
// that is no whole number of ms, s, min or h prints in ns ("7/1500ns").
std::string format_rate(uint32_t count, uint64_t period_ns);

// Parse a policy as `create --policy` takes it: "fifo", "bounded" (the
// default bound, SHMSEM_DEFAULT_MAX_BYPASS_NS) or "bounded:DURATION" (as
// parse_duration() reads it, more than 0 and at most SHMSEM_MAX_BYPASS_NS).
// Returns "" and sets *policy (SHMSEM_POLICY_*) and *max_bypass_ns (0 under
// FIFO, the bound under BOUNDED), or what is wrong with `text`, beginning
// "invalid --policy '<text>': " (quoted as given: print it through
// printable()).
std::string parse_policy(const std::string &text, uint32_t *policy,
                         uint64_t *max_bypass_ns);

// A policy as parse_policy() reads it back: "fifo", "bounded:1ms",
// "bounded:2m", "bounded:1.5ms" (the largest unit that is exact, else ms
// with a fraction).
std::string format_policy(uint32_t policy, uint64_t max_bypass_ns);

// Print "shmsem: <verb> <name>: <library message>[; <hint>]" to stderr.
// `err` is a negative errno from the library; the hint says what to do
// about it when `verb` is done (`rm` of a missing name: nothing).
void report_error(const char *verb, const std::string &name, int err);

// The exit code for a library error (exit_codes.h).
int exit_code_for(int err);

// Command name (/proc/<pid>/comm) and the space-joined argument list
// (/proc/<pid>/cmdline, at most `max` bytes); "" when unreadable.
std::string proc_comm(pid_t pid);
std::string proc_cmdline(pid_t pid, size_t max = 256);

// CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE and CLOCK_REALTIME in ns.
uint64_t now_ns(clockid_t clock);

// Print rows under a header row, columns left-aligned and padded to the
// widest cell (display width: UTF-8 continuation bytes are not counted); the
// last column is not padded.
void print_table(FILE *f, const std::vector<std::string> &header,
                 const std::vector<std::vector<std::string>> &rows,
                 const char *indent = "  ");

// RAII for an open semaphore.
struct Handle {
  shmsem_t *s = nullptr;
  Handle() = default;
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  ~Handle() { shmsem_detach(s); }
};

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_COMMON_H
