// Segment lifecycle below the state machine: name rules, open and
// validate, map, detach, unlink (creation: api/create.h).
#ifndef SHMSEM_SRC_SEGMENT_H
#define SHMSEM_SRC_SEGMENT_H

#include <sys/types.h>

#include "handle.h"

namespace shmsem::detail {

// 0 if `name` is a valid POSIX shm name for a semaphore, else -EINVAL.
int check_name(const char *name);
// Open `name` (flags as shmsem_open's); with `owner`, only a file that
// user owns (else -EPERM).
int open_named(const char *name, int flags, const uid_t *owner, shmsem_t **out);
// The creator's handle on the segment it has just built (and trusts).
shmsem_t *created_handle(void *base, size_t size);
int segment_open(const char *name, int flags, shmsem_t **out);
void segment_detach(shmsem_t *s);
int segment_unlink(const char *name);
// A read-only handle over `copy`, a private anonymous mapping of `size`
// bytes holding a copy of a segment (the CLI's snapshot reads the file once
// and inspects the copy, so truncation cannot SIGBUS it mid-walk). The copy
// is validated like a mapping; on success the handle owns it and
// segment_detach() unmaps it. Nothing may lock or write through it.
int segment_view(void *copy, size_t size, shmsem_t **out);
// SHMSEM_SNAPSHOT (segment_copy.cc): a private copy of the file of `name`
// (checked) behind a read-only handle. The errors of shmsem_open, and -EIO
// if the file shrank while it was copied.
int segment_copy(const char *name, shmsem_t **out);
// Validate a mapped segment of `size` bytes (also used by `shmsem list`);
// on success, *copy (if not NULL) holds the header that was validated.
int segment_validate(const void *base, size_t size, Header *copy = nullptr);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_SEGMENT_H
