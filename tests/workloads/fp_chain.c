/* SPDX-License-Identifier: MIT */
/*
 * Workload with a known call chain, built with frame pointers:
 *   main -> fp_a -> fp_b -> fp_c (busy loop, or syscalls)
 *
 *   fp_chain spin SECS      busy loop in fp_c for SECS seconds (0 = forever)
 *   fp_chain syscalls SECS  read(/dev/zero, 1 MiB) in a loop: mostly kernel time
 *   fp_chain threads SECS   main spins; a thread named "fp_worker" spins too
 *                           for SECS/2 and exits (a thread exit, not a process exit)
 *   fp_chain fork SECS      waits for one byte on stdin, then forks a child that
 *                           spins 0.4 s as "fp_child", execs "fp_chain spin 0.4"
 *                           and exits; the parent waits for it, then spins
 *
 * First line on stdout: "fp_chain main=0x.. fp_a=0x.. fp_b=0x.. fp_c=0x.."
 * (runtime addresses) so a test can check unwound return addresses without a
 * symbolizer.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static volatile unsigned long sink;
static char zero_buf[1 << 20];

static void on_alarm(int sig)
{
	(void)sig;
	stop = 1;
}

static void arm_timer(double secs)
{
	struct itimerval it = { 0 };

	stop = 0;
	if (secs <= 0)
		return;
	it.it_value.tv_sec = (long)secs;
	it.it_value.tv_usec = (long)((secs - (long)secs) * 1e6);
	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &it, NULL);
}

__attribute__((noinline)) void fp_c(int syscalls)
{
	int fd = syscalls ? open("/dev/zero", O_RDONLY) : -1;

	while (!stop) {
		if (fd >= 0 && read(fd, zero_buf, sizeof(zero_buf)) < 0)
			break;
		sink++;
	}
	if (fd >= 0)
		close(fd);
}

__attribute__((noinline)) void fp_b(int syscalls)
{
	fp_c(syscalls);
	sink++;
}

__attribute__((noinline)) void fp_a(int syscalls)
{
	fp_b(syscalls);
	sink++;
}

/* Thread-exit case: a busy thread that ends while the process lives on.
 * Uses a counted loop since the process-wide timer belongs to main. */
static void *worker(void *arg)
{
	unsigned long n = (unsigned long)arg;

	prctl(PR_SET_NAME, "fp_worker");
	for (unsigned long i = 0; i < n; i++)
		sink++;
	return NULL;
}

static void run_child(void)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		_exit(126);
	self[n] = 0; /* the real path, so comm after exec is "fp_chain" */
	prctl(PR_SET_NAME, "fp_child");
	arm_timer(0.4);
	fp_a(0);
	execl(self, "fp_chain", "spin", "0.4", (char *)NULL);
	_exit(127);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "spin";
	double secs = argc > 2 ? atof(argv[2]) : 0;

	signal(SIGPIPE, SIG_IGN); /* a test may have stopped reading */
	printf("fp_chain main=%p fp_a=%p fp_b=%p fp_c=%p\n", (void *)main, (void *)fp_a,
	       (void *)fp_b, (void *)fp_c);
	fflush(stdout);

	if (!strcmp(mode, "threads")) {
		pthread_t th;

		/* ~1e9 increments: about half a second to a second on one core */
		pthread_create(&th, NULL, worker, (void *)(unsigned long)(secs * 5e8));
		arm_timer(secs);
		fp_a(0);
		pthread_join(th, NULL);
	} else if (!strcmp(mode, "fork")) {
		char c;
		pid_t pid;

		if (read(0, &c, 1) != 1)
			return 1;
		pid = fork();
		if (pid == 0)
			run_child();
		waitpid(pid, NULL, 0);
		arm_timer(secs);
		fp_a(0);
	} else {
		arm_timer(secs);
		fp_a(!strcmp(mode, "syscalls"));
	}
	return 0;
}
