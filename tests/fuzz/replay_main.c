/* replay_main.c - a plain main() that feeds every regular file of a directory (in sorted name
 * order) to LLVMFuzzerTestOneInput, so the fuzz corpora run in the normal test suite without
 * libFuzzer. Usage: replay_<target> DIR. Prints "replayed N files"; exits 1 when DIR is missing,
 * unreadable or holds no files (a missing corpus is a failure, not a pass). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads a whole file into a buffer of exactly its size (so ASan sees reads past the end). */
static uint8_t *read_all(const char *path, size_t *size) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fileno(fp), &st) == 0 && st.st_size >= 0) {
        *size = (size_t)st.st_size;
        buf = malloc(*size ? *size : 1);
        if (buf && fread(buf, 1, *size, fp) != *size) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(fp);
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 1;
    }
    DIR *dir = opendir(argv[1]);
    if (!dir) {
        fprintf(stderr, "%s: cannot open corpus directory '%s'\n", argv[0], argv[1]);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *d; (d = readdir(dir)) != NULL;) {
        char path[4096];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", argv[1], d->d_name) >= (int)sizeof path ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) {
                rc = 1;
                break;
            }
            names = grown;
        }
        if (!(names[n] = strdup(path))) {
            rc = 1;
            break;
        }
        n++;
    }
    closedir(dir);
    if (names) qsort(names, n, sizeof *names, cmp_names);
    size_t replayed = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t size = 0;
        uint8_t *buf = read_all(names[i], &size);
        if (!buf) {
            fprintf(stderr, "%s: cannot read '%s'\n", argv[0], names[i]);
            rc = 1;
            break;
        }
        LLVMFuzzerTestOneInput(buf, size);
        free(buf);
        replayed++;
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    printf("replayed %zu files\n", replayed);
    if (rc == 0 && replayed == 0) {
        fprintf(stderr, "%s: no files in '%s'\n", argv[0], argv[1]);
        rc = 1;
    }
    return rc;
}
