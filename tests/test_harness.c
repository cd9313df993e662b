/* test_harness.c — checks of the test harness itself. */
#include "test.h"

#include <stdlib.h>

TEST(harness, run_cmd_captures_output_and_status) {
    char *out = NULL;
    int st = run_cmd("printf 'a b'; exit 3", false, &out);
    EXPECT_EQ_I(st, 3);
    EXPECT_STR_EQ(out, "a b");
    free(out);
}
