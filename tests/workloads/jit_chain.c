// SPDX-License-Identifier: MIT
/*
 * jit_chain: main -> jit_run -> jit_call (frame pointer: its CFA rule is
 * RBP-based) -> a kernel generated into anonymous executable memory, as
 * oneDNN's JIT kernels are: no unwind table, and RBP used as a general
 * register inside (oneDNN's AVX-512 kernels load an offset into it), so
 * neither a frame-pointer step nor the register tells the caller's frame.
 * The kernel's preamble saves the callee-saved registers in oneDNN's order:
 *
 *   jit_chain new SECONDS  oneDNN 3.x: push rbp; mov rbp, rsp; push rbx, r12-r15
 *   jit_chain old SECONDS  RBX first: push rbx; push rbp, r12-r15 (RBP two
 *                          words below the return address)
 *
 * Spins in the kernel for SECONDS, then prints "calls=N".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define SPINS_PER_CALL 2000000

static const unsigned char body[] = {
	0x48, 0xc7, 0xc5, 0x00, 0x04, 0x00, 0x00, /* mov rbp, 0x400 */
	0x48, 0x89, 0xf9,                         /* mov rcx, rdi */
	0x48, 0xff, 0xc9,                         /* 1: dec rcx */
	0x75, 0xfb,                               /* jnz 1b */
	0x48, 0x89, 0xf8,                         /* mov rax, rdi */
};
static const unsigned char pre_new[] = { 0x55, 0x48, 0x89, 0xe5, 0x53, 0x41, 0x54,
					 0x41, 0x55, 0x41, 0x56, 0x41, 0x57 };
static const unsigned char post_new[] = { 0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d,
					  0x41, 0x5c, 0x5b, 0x5d, 0xc3 };
static const unsigned char pre_old[] = { 0x53, 0x55, 0x41, 0x54, 0x41, 0x55, 0x41,
					 0x56, 0x41, 0x57, 0x90, 0x90, 0x90 };
static const unsigned char post_old[] = { 0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d,
					  0x41, 0x5c, 0x5d, 0x5b, 0xc3 };

typedef long (*kernel_fn)(long);

static kernel_fn generate(int new_order)
{
	unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
				0);
	size_t n = 0;

	if (p == MAP_FAILED)
		return NULL;
	memcpy(p + n, new_order ? pre_new : pre_old, sizeof(pre_new));
	n += sizeof(pre_new);
	memcpy(p + n, body, sizeof(body));
	n += sizeof(body);
	memcpy(p + n, new_order ? post_new : post_old, sizeof(post_new));
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		return NULL;
	return (kernel_fn)(uintptr_t)p;
}

/* RBX holds a value of this frame across the call: the kernel's saved RBX
 * is then no frame pointer of the caller. */
__attribute__((noinline)) static long jit_call(kernel_fn k, long n)
{
	long keep = n ^ 0x5a5a;

	__asm__ volatile("" : "+b"(keep));
	return k(n) + (keep & 1);
}

__attribute__((noinline)) static long jit_run(kernel_fn k, double seconds)
{
	struct timespec t0, t;
	long calls = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		jit_call(k, SPINS_PER_CALL);
		calls++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	return calls;
}

int main(int argc, char **argv)
{
	kernel_fn k;

	if (argc != 3 || (strcmp(argv[1], "new") && strcmp(argv[1], "old"))) {
		fprintf(stderr, "usage: jit_chain new|old SECONDS\n");
		return 2;
	}
	k = generate(!strcmp(argv[1], "new"));
	if (!k) {
		perror("jit_chain: mmap");
		return 1;
	}
	printf("calls=%ld\n", jit_run(k, atof(argv[2])));
	return 0;
}
