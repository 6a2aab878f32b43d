/* Known call chain main -> a -> b -> c with the hot loop in c; built with
 * frame pointers.  Usage: cpu_chain SECONDS */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void c(double end)
{
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			sink += i * 7;
}

__attribute__((noinline)) void b(double end)
{
	c(end);
	sink++;
}
__attribute__((noinline)) void a(double end)
{
	b(end);
	sink++;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	a(now() + secs);
	return 0;
}
