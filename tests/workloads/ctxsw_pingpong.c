/* Context-switch benchmark workload (bench/ctxsw.py): two threads ping-pong
 * one byte over two pipes, so each round trip blocks each thread once in
 * read(2) (two voluntary context switches of the target).
 *
 *   ctxsw_pingpong SECONDS [ROUND_TRIPS_PER_S]
 *
 * Unpaced (no rate, or 0): as fast as the machine allows; the figure is the
 * throughput.  Paced: bursts every millisecond (clock_nanosleep,
 * TIMER_ABSTIME) so that the target switches about 2 x RATE times a second.
 * Waits for SIGUSR1 (or the file named by GS_GO) before the measured part
 * only when GS_GO is set.  Prints one line when done:
 *   round_trips=N seconds=S per_s=R t0=T0 t1=T1 pid=P
 * (T0/T1: CLOCK_MONOTONIC seconds of the measured part). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int ab[2], ba[2];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *pong(void *arg)
{
	char c;

	(void)arg;
	while (read(ab[0], &c, 1) == 1 && c != 'q')
		if (write(ba[1], &c, 1) != 1)
			break;
	return NULL;
}

static int round_trip(void)
{
	char c = 'x';

	return write(ab[1], &c, 1) == 1 && read(ba[0], &c, 1) == 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5, rate = argc > 2 ? atof(argv[2]) : 0;
	const char *go = getenv("GS_GO");
	unsigned long long n = 0;
	struct timespec next;
	struct stat st;
	pthread_t t;
	double t0, t1;
	char q = 'q';

	if (pipe(ab) || pipe(ba) || pthread_create(&t, NULL, pong, NULL))
		return 1;
	for (int i = 0; go && i < 3000 && stat(go, &st); i++)
		usleep(10000);
	t0 = now_s();
	clock_gettime(CLOCK_MONOTONIC, &next);
	while ((t1 = now_s()) - t0 < secs) {
		if (rate > 0) {
			/* one millisecond's worth, then sleep to the next tick */
			for (int i = 0; i < (int)(rate / 1000); i++, n++)
				if (round_trip())
					return 1;
			next.tv_nsec += 1000000;
			if (next.tv_nsec >= 1000000000) {
				next.tv_sec++;
				next.tv_nsec -= 1000000000;
			}
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		} else {
			for (int i = 0; i < 100; i++, n++)
				if (round_trip())
					return 1;
		}
	}
	if (write(ab[1], &q, 1) != 1)
		return 1;
	pthread_join(t, NULL);
	printf("round_trips=%llu seconds=%.6f per_s=%.1f t0=%.6f t1=%.6f pid=%d\n", n, t1 - t0,
	       n / (t1 - t0), t0, t1, (int)getpid());
	return 0;
}
