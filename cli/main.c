/* main.c - placeholder entry, replaced by the subcommand dispatcher. */
#include "slate.h"
#include <stdio.h>
int main(void) { printf("%s\n", slate_status_str(SLATE_OK)); return 0; }
