// The process-local handle behind shmsem_t: one mapping of one segment.
#ifndef SHMSEM_SRC_HANDLE_H
#define SHMSEM_SRC_HANDLE_H

#include <stddef.h>

#include "layout.h"

struct shmsem_handle {
  void *base;
  size_t size;
  bool rdonly;
  shmsem::detail::Header *hdr;
  shmsem::detail::Core *core;
  shmsem::detail::LeaseRecord *leases;
  shmsem::detail::WaiterSlot *slots;
  uint32_t permits;
  uint32_t max_waiters;
};

#endif  // SHMSEM_SRC_HANDLE_H
