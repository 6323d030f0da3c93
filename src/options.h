/*
 * options.h: THE table of options (one X-macro list; src/options.c builds the parser, the
 * defaults and the printer from it, and docs/options.md is checked against it by a test).
 *
 *   X(kind, name, default, meaning)
 *   kind: BOOL (0/1, also true/false/yes/no/on/off), LONG (integer, k/m/g suffixes), MS (ms)
 *
 * Add an option here and nowhere else; read it with prd__opt(name).
 */
#ifndef PRD_OPTIONS_H
#define PRD_OPTIONS_H

#ifdef PRD_DEBUG
#define PRD__ABORT_DEFAULT 1
#else
#define PRD__ABORT_DEFAULT 0
#endif

#define PRD_OPTIONS(X)                                                                          \
  X(BOOL, abort_on_error, PRD__ABORT_DEFAULT,                                                   \
    "abort after reporting a bad free or corruption (default: 1 in Debug builds, else 0)")      \
  X(BOOL, verbose, 0, "report option parsing and other notices on stderr")                     \
  X(LONG, fault_mmap, 0,                                                                        \
    "fault injection: make every Nth OS mapping fail (0 = off; also PRUDENCE_FAULT_MMAP=N)") \
  X(MS, vmem_sleep_ms, 1000,                                                                    \
    "how long a PRD_VM_SLEEP allocation from an importing arena retries a failed import "      \
    "before it returns NULL with ENOMEM")                                                     \
  X(MS, slab_working_set, 15000,                                                                \
    "ms a free slab stays in its cache before a reap may return it (seed 002 3.4: 15 s)")      \
  X(LONG, debug, 0,                                                                             \
    "debug flags for every new cache, as PRD_CACHE_* bits; PRUDENCE_DEBUG=patterns,... by name")

#endif
