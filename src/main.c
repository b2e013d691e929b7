// main: the command line of ./hogwild, nothing else.
#include "hw/err.h"

#include <stdio.h>
#include <string.h>

static void print_usage(FILE *out) {
    fprintf(out,
            "usage: hogwild [options]\n"
            "\n"
            "Asynchronous lock-free (Hogwild) SGD across worker processes that share one set of weights.\n"
            "\n"
            "  -h, --help       this text\n"
            "  --version        the version\n");
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            print_usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("hogwild 0.1.0\n");
            return 0;
        }
        fprintf(stderr, "hogwild: unknown option '%s'\n\n", argv[i]);
        print_usage(stderr);
        return 2;
    }
    print_usage(stdout);
    return 0;
}
