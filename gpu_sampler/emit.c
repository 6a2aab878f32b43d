/* SPDX-License-Identifier: MIT */
/* USDT probes of the agent.  The semaphores are raised by the kernel when
 * gpusample attaches uprobes to the probes (ref_ctr_offset); reading them is
 * the agent's only cost while dormant. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "agent.h"

__extension__ unsigned short gpusample_record_semaphore __attribute__((unused))
__attribute__((section(".probes"))) __attribute__((visibility("hidden")));
__extension__ unsigned short gpusample_launch_semaphore __attribute__((unused))
__attribute__((section(".probes"))) __attribute__((visibility("hidden")));

bool gs_emit_armed(void)
{
	return __atomic_load_n(&gpusample_record_semaphore, __ATOMIC_RELAXED) != 0;
}

bool gs_emit_launch_wanted(void)
{
	return __atomic_load_n(&gpusample_launch_semaphore, __ATOMIC_RELAXED) != 0;
}

int gs_emit_record(void *rec, uint32_t size)
{
	uint64_t sz = size;

	if (size > GS_GPU_REC_MAX || (size & 7))
		return -1;
	if (!gpusample_record_semaphore)
		return 0;
	STAP_PROBE2(gpusample, record, rec, sz);
	return 0;
}

void gs_emit_launch(struct gs_gpu_launch *l)
{
	uint64_t sz = sizeof(*l);

	if (gpusample_launch_semaphore)
		STAP_PROBE2(gpusample, launch, l, sz);
}

void gs_agent_log(const char *fmt, ...)
{
	static int on = -1;
	va_list ap;

	if (on < 0) {
		const char *e = getenv("GS_AGENT_DEBUG");
		on = e && *e && *e != '0';
	}
	if (!on)
		return;
	va_start(ap, fmt);
	fputs("gpusample-agent: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}
