// mpirun_cleanup: what this host's MPI daemon would have removed, removed when the daemon dies
// first, by a forked process (the janitor, hw_mpirun_cleanup_start).
//
// mpirun (or, on another host, the orted it starts there) owns the job's files on its host: the
// session folder (/tmp/ompi.HOST.UID/pid.N, given to the ranks as OMPI_MCA_orte_jobfam_session_dir)
// and the ranks' shared-memory segments (vader_segment.HOST.UID.JOBID.LOCALRANK in /dev/shm or
// OMPI_MCA_btl_vader_backing_directory), which the ranks register with it for removal. When the
// daemon itself is killed with SIGKILL, Open MPI 4.1's ranks see the lost connection and _exit()
// from a thread of its own: no atexit handler, no MPI_Finalize, so nothing removes those files.
//
// So the first rank on each host forks a janitor as it starts (main(), before anything starts a
// thread: the GPU libraries, MPI_Init, the data loaders): a process that
// holds no file descriptor and sleeps in a 100 ms poll. When the rank has exited:
//   - the daemon still alive: a normal end, or one the daemon handles; the janitor leaves;
//   - the daemon gone: it removes this job's session folder and segments (and any hogwild shared
//     memory whose creator is dead, as --clean-shm does), then leaves.
// When the daemon dies while the rank lives, the janitor gives the rank 5 s to go (Open MPI ends
// it at once), then kills it, and cleans up.
#include "hw/comm.h"

#include "hw/err.h"
#include "hw/shm.h"
#include "hw/procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

// When process `pid` started (hw_process_stat), or 0 when it is gone or a zombie.
static unsigned long long start_of_live(pid_t pid) {
    unsigned long long start;
    int ended;
    return hw_process_stat(pid, &start, &ended) == HW_OK && !ended ? start : 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;  // go on: remove what can be removed
}

// The session folder of this job, only when it lies inside the top session folder mpirun named.
static void remove_session(void) {
    const char *top = getenv("OMPI_MCA_orte_top_session_dir");
    const char *job = getenv("OMPI_MCA_orte_jobfam_session_dir");
    size_t n = top ? strlen(top) : 0;
    if (!top || !job || n == 0 || strncmp(job, top, n) != 0 || job[n] != '/') return;
    nftw(job, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    rmdir(top);  // only when empty: other jobs of this user may still use it
}

// vader_segment.HOST.UID.JOBID.LOCALRANK of this job, JOBID in hex as Open MPI writes it.
static void remove_segments(void) {
    const char *jobid_text = getenv("OMPI_MCA_ess_base_jobid");
    const char *dir = getenv("OMPI_MCA_btl_vader_backing_directory");
    if (!dir || !dir[0]) dir = "/dev/shm";
    if (!jobid_text) return;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char prefix[300], middle[64];
    snprintf(prefix, sizeof prefix, "vader_segment.%s.", host);
    snprintf(middle, sizeof middle, ".%lx.", strtoul(jobid_text, NULL, 10));
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || !strstr(e->d_name + strlen(prefix), middle)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

__attribute__((noreturn)) static void cleanup_run(pid_t rank, pid_t daemon, unsigned long long daemon_start) {
    double rank_alone_s = 0;  // how long the rank has outlived its daemon
    for (;;) {
        usleep(100 * 1000);
        int rank_gone = getppid() != rank;  // reparented: the rank has exited
        int daemon_gone = start_of_live(daemon) != daemon_start;
        if (rank_gone && !daemon_gone) _exit(0);  // the daemon removes its own files
        if (!daemon_gone) continue;
        if (!rank_gone && (rank_alone_s += 0.1) < 5) continue;
        if (!rank_gone) kill(rank, SIGKILL);
        remove_segments();
        remove_session();
        int removed = 0;
        hw_shm_clean_stale(&removed);
        _exit(0);
    }
}

int hw_mpirun_cleanup_start(const hw_world *world) {
    if (world->size < 2 || world->local_rank != 0) return HW_OK;
    // A fork beside other threads could copy a lock they hold (malloc's) into the janitor.
    int threads = hw_process_threads();
    if (threads > 1) {
        return hw_fail("rank %d: the MPI file janitor must start before any thread (%d run)", world->rank, threads);
    }
    pid_t rank = getpid(), daemon = getppid();
    unsigned long long daemon_start = start_of_live(daemon);
    if (!daemon_start) return HW_OK;  // no daemon to watch (the rank was reparented already)
    pid_t pid = fork();
    if (pid < 0) return hw_fail("rank %d: fork of the MPI file janitor: %s", world->rank, strerror(errno));
    if (pid > 0) return HW_OK;
    // The janitor holds none of the rank's files: mpirun must see the rank's output end when the
    // rank ends, and no lock or socket of the rank may outlive it.
    struct rlimit limit;
    int max_fd = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536 ? (int)limit.rlim_cur : 65536;
    for (int fd = 0; fd < max_fd; fd++) close(fd);
    int null = open("/dev/null", O_RDWR);
    if (null == 0) {
        dup2(0, 1);
        dup2(0, 2);
    }
    // Signals meant for the job are the rank's to handle; mpirun's SIGTERM or SIGKILL of the
    // rank's process group (which this joined at fork) ends this too.
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    cleanup_run(rank, daemon, daemon_start);
}
