/* replay.c - runs a libFuzzer entry point without libFuzzer: every file of
 * the given corpus folders, then a fixed number of random mutations of each
 * (bit flips, interesting integers, cuts, erased, inserted and copied
 * ranges) from a fixed seed, so a failure reproduces.  Each input sits in an
 * exact-size heap buffer so that the sanitizers catch any over-read.
 * usage: NAME-replay [-n MUTATIONS_PER_FILE] [-s SEED] DIR_OR_FILE... */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng;

static uint64_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}

static long n_runs;

static void run_one(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) exit(1);
    memcpy(copy, data, size);
    LLVMFuzzerTestOneInput(copy, size);
    free(copy);
    n_runs++;
}

/* One random edit of buf (capacity cap) in place; returns the new length. */
static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
    static const uint64_t interesting[] = {
        0, 1, 2, 3, 4, 5, 8, 9, 12, 13, 16, 31, 32, 33, 255, 256, 0x7fff, 0xffff, 0x7fffffff,
        0x80000000u, 0xffffffffu, 1ull << 32, 1ull << 40, 0x7fffffffffffffffull,
        0x8000000000000000ull, 0xffffffffffffffffull};
    size_t pos = len ? (size_t)(rnd() % len) : 0;
    switch (rnd() % 8) {
    case 0: /* flip a bit */
        if (len) buf[pos] ^= (uint8_t)(1u << (rnd() % 8));
        return len;
    case 1: /* set a byte */
        if (len) buf[pos] = (uint8_t)rnd();
        return len;
    case 2: /* an interesting u64, or the remaining length */
    case 3: { /* an interesting u32 */
        int w = (rnd() & 1) ? 8 : 4;
        uint64_t v = interesting[rnd() % (sizeof(interesting) / sizeof(interesting[0]))];
        if (rnd() % 4 == 0) v = len - pos + rnd() % 3 - 1;
        if (pos + (size_t)w <= len) memcpy(buf + pos, &v, (size_t)w);
        return len;
    }
    case 4: /* cut */
        return len ? (size_t)(rnd() % len) : 0;
    case 5: { /* erase a range */
        size_t n = len - pos ? 1 + (size_t)(rnd() % (len - pos < 64 ? len - pos : 64)) : 0;
        memmove(buf + pos, buf + pos + n, len - pos - n);
        return len - n;
    }
    case 6: { /* insert random bytes */
        size_t n = 1 + (size_t)(rnd() % 16);
        if (len + n > cap) return len;
        memmove(buf + pos + n, buf + pos, len - pos);
        for (size_t i = 0; i < n; i++) buf[pos + i] = (uint8_t)rnd();
        return len + n;
    }
    default: { /* copy a range over another place */
        if (!len) return len;
        size_t from = (size_t)(rnd() % len);
        size_t n = 1 + (size_t)(rnd() % 32);
        if (from + n > len) n = len - from;
        if (pos + n > len) n = len - pos;
        memmove(buf + pos, buf + from, n);
        return len;
    }
    }
}

static void replay_file(const char *path, long mutations)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t len = n > 0 ? (size_t)n : 0;
    size_t cap = len + 4096;
    uint8_t *orig = malloc(len ? len : 1), *buf = malloc(cap);
    if (!orig || !buf || fread(orig, 1, len, f) != len) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    run_one(orig, len);
    for (long i = 0; i < mutations; i++) {
        memcpy(buf, orig, len);
        size_t l = len;
        int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits; e++) l = mutate(buf, l, cap);
        run_one(buf, l);
    }
    free(orig);
    free(buf);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    long mutations = 2000;
    rng = 0x2545f4914f6cdd1dull;
    int i = 1, n_files = 0;
    for (; i < argc && argv[i][0] == '-'; i += 2) {
        if (i + 1 >= argc) break;
        if (!strcmp(argv[i], "-n")) mutations = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) rng = strtoull(argv[i + 1], NULL, 0) | 1;
        else break;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: %s [-n MUTATIONS_PER_FILE] [-s SEED] DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    for (; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) {
            fprintf(stderr, "cannot stat %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            replay_file(argv[i], mutations);
            n_files++;
            continue;
        }
        /* A folder: its files in name order, so runs repeat exactly. */
        DIR *d = opendir(argv[i]);
        if (!d) return 1;
        char **names = NULL;
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            names = realloc(names, (n + 1) * sizeof(*names));
            size_t l = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[n] = malloc(l);
            snprintf(names[n++], l, "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof(*names), cmp_str);
        for (size_t k = 0; k < n; k++) {
            replay_file(names[k], mutations);
            n_files++;
            free(names[k]);
        }
        free(names);
    }
    if (!n_files) {
        fprintf(stderr, "no inputs found\n");
        return 1;
    }
    printf("%d files, %ld inputs run\n", n_files, n_runs);
    return 0;
}
