/* Spins until SIGUSR1 (sent once the profiler is attached), then forks two
 * children: one busy for LONG seconds, one for 0.3 s.  Gives up waiting
 * after MAXWAIT seconds.  Usage: cpu_forker MAXWAIT LONG */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void spin(double secs)
{
	double end = now() + secs;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			sink += i;
}

__attribute__((noinline)) void child_long_work(double secs)
{
	spin(secs);
}
__attribute__((noinline)) void child_short_work(void)
{
	spin(0.3);
}
__attribute__((noinline)) void parent_work(double secs)
{
	spin(secs);
}

__attribute__((noinline)) void parent_wait(double max)
{
	double end = now() + max;
	while (!go && now() < end)
		for (int i = 0; i < 100000; i++)
			sink += i;
}

int main(int argc, char **argv)
{
	double delay = argc > 1 ? atof(argv[1]) : 1, secs = argc > 2 ? atof(argv[2]) : 2;
	pid_t a, b;

	signal(SIGUSR1, on_usr1);
	parent_wait(delay);
	if ((a = fork()) == 0) {
		child_long_work(secs);
		_exit(0);
	}
	if ((b = fork()) == 0) {
		child_short_work();
		_exit(0);
	}
	parent_work(secs);
	waitpid(a, NULL, 0);
	waitpid(b, NULL, 0);
	return 0;
}
