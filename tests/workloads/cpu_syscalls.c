/* Syscall-heavy loop: reads from /dev/zero and writes to /dev/null so most
 * samples land in the kernel.  Usage: cpu_syscalls SECONDS */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[65536];

__attribute__((noinline)) void syscall_loop(double secs)
{
	int in = open("/dev/zero", O_RDONLY), out = open("/dev/null", O_WRONLY);
	struct timespec ts;
	double end;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	end = ts.tv_sec + ts.tv_nsec / 1e9 + secs;
	do {
		for (int i = 0; i < 100; i++) {
			if (read(in, buf, sizeof(buf)) < 0 || write(out, buf, sizeof(buf)) < 0)
				exit(1);
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
	} while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
}

int main(int argc, char **argv)
{
	syscall_loop(argc > 1 ? atof(argv[1]) : 5);
	return 0;
}
