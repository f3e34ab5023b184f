/* template-bench.c - parsing and rendering the shared chat templates
 * (lib/jinja): microseconds per parse and per render of each template with
 * the largest conversations (tools offered; 26 messages).
 * usage: template-bench SHARED_DIR [REPEATS] */
#include "error.h"
#include "fileio.h"
#include "jinja.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: template-bench SHARED_DIR [REPEATS]\n");
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 100;
    char dir[4096], path[8192];
    snprintf(dir, sizeof(dir), "%s/templates", argv[1]);
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return 1;
    }
    char *names[256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 256;)
        if (strstr(e->d_name, ".jinja")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof(char *), by_name);
    const char *ctxs[] = {"03-tools-offered", "08-long"};
    lp_json_doc_t *docs[2];
    for (int c = 0; c < 2; c++) {
        char *text;
        size_t len;
        snprintf(path, sizeof(path), "%s/contexts/%s.json", dir, ctxs[c]);
        if (lp_read_file(path, &text, &len) || lp_json_parse(text, len, &docs[c])) {
            fprintf(stderr, "%s: %s\n", path, lp_error_msg());
            return 1;
        }
        free(text);
    }
    printf("%-40s %8s %14s %14s\n", "template", "parse us", ctxs[0], ctxs[1]);
    for (int i = 0; i < n; i++) {
        char *src;
        size_t len;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (lp_read_file(path, &src, &len)) continue;
        double t0 = now_us();
        for (int r = 0; r < reps; r++) {
            lp_jinja_tmpl_t *t;
            if (lp_jinja_parse(src, len, &t)) break;
            lp_jinja_tmpl_destroy(&t);
        }
        double parse = (now_us() - t0) / reps;
        lp_jinja_tmpl_t *t;
        if (lp_jinja_parse(src, len, &t)) {
            printf("%-40s %s\n", names[i], lp_error_msg());
            free(src);
            continue;
        }
        printf("%-40s %8.0f", names[i], parse);
        for (int c = 0; c < 2; c++) {
            t0 = now_us();
            int rc = 0;
            for (int r = 0; r < reps; r++) {
                char *out = NULL;
                size_t ol;
                rc = lp_jinja_chat_render(t, src, len, lp_json_root(docs[c]), NULL, &out, &ol);
                free(out);
            }
            double us = (now_us() - t0) / reps;
            if (rc) printf(" %9.0f fails", us);
            else printf(" %14.0f", us);
        }
        printf("\n");
        lp_jinja_tmpl_destroy(&t);
        free(src);
    }
    for (int c = 0; c < 2; c++) lp_json_doc_destroy(&docs[c]);
    for (int i = 0; i < n; i++) free(names[i]);
    return 0;
}
