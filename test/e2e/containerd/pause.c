/*
 * pause: the sandbox process of every pod jetlet's e2e tests run on
 * containerd. It holds the pod's namespaces and does nothing else: it sleeps
 * in pause(), reaps any child re-parented to it (it is PID 1 of the pod when
 * the pod shares its PID namespace), and exits 0 on SIGTERM or SIGINT.
 * Built with `gcc -static` by setup.sh; kubernetes' build/pause/linux/pause.c
 * does the same.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void sigdown(int signo)
{
	(void)signo;
	_exit(0);
}

static void sigreap(int signo)
{
	(void)signo;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(int argc, char **argv)
{
	struct sigaction sa;

	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		puts("pause (jetlet e2e)");
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: warning: not PID 1\n");

	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = sigdown;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) {
		perror("pause: sigaction");
		return 1;
	}
	sa.sa_handler = sigreap;
	sa.sa_flags = SA_NOCLDSTOP;
	if (sigaction(SIGCHLD, &sa, NULL) < 0) {
		perror("pause: sigaction SIGCHLD");
		return 1;
	}
	for (;;)
		pause();
	return 42; /* not reached */
}
