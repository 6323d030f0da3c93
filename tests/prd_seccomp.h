/*
 * prd_seccomp.h: a system call refused, as an old kernel or a container's seccomp profile
 * refuses it, for the tests of what the library does then (header only).
 *
 *   prd_test_refuse(nr, arg, value, err, all_threads)  from now on, system call nr fails with
 *       errno err in this process: every call, or with arg >= 0 only those whose argument
 *       number arg (its low 32 bits) is value; all_threads: every thread of the process, else
 *       the calling one and the threads it creates later.  0, or -1 where seccomp is refused
 *       (the caller skips its check then).
 */
#ifndef PRD_SECCOMP_H
#define PRD_SECCOMP_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline int prd_test_refuse(long nr, int arg, uint32_t value, int err, bool all_threads)
{
  struct sock_filter any[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((uint32_t)err & SECCOMP_RET_DATA)),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_filter one[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 3),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
             (uint32_t)(offsetof(struct seccomp_data, args) + (size_t)(arg < 0 ? 0 : arg) * 8)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((uint32_t)err & SECCOMP_RET_DATA)),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = { arg < 0 ? (unsigned short)(sizeof(any) / sizeof(any[0]))
                                     : (unsigned short)(sizeof(one) / sizeof(one[0])),
                             arg < 0 ? any : one };
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return -1;
  return syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
                 all_threads ? SECCOMP_FILTER_FLAG_TSYNC : 0, &prog) == 0 ? 0 : -1;
}

#endif
