/* sweep.h - remove what crashed pipelines left behind: the shared-memory
 * segments and run folders whose owner process is gone.
 *
 * Both carry their owner's PID in the name: a segment is
 * "lmpipe-PID-HEX16" (lp_shm_ring_random_name; its header names the engine
 * that created it too), a run folder of lmpipe up "lmpipe-PID-XXXXXX"
 * (mkdtemp).  Only entries of exactly that form, owned by this user, whose
 * owner PIDs are all dead, are touched; in a run folder only the four
 * service socket files are removed before the rmdir, so a folder holding
 * anything else stays. */
#ifndef LP_TOOLS_SWEEP_H
#define LP_TOOLS_SWEEP_H

typedef struct lp_sweep_counts {
    int segments; /* shared-memory segments removed */
    int run_dirs; /* run folders removed */
} lp_sweep_counts_t;

/* Sweep `shm_dir` (normally /dev/shm) and `tmp_dir` (where lmpipe up makes
 * its run folders, /tmp).  Either may be NULL (skipped).  Returns 0, or a
 * negative code when a folder cannot be read (what could be swept is). */
int lp_sweep_stale(const char *shm_dir, const char *tmp_dir, lp_sweep_counts_t *out);

#endif
