/* tests/unit/test_vx_family.c — the family tables agree: every family of vindex/vx_family.c has a
 * row in the model's table (model/md_family.c), and a Hugging Face row (vindex/vx_hf_families.c)
 * and a synth row (vindex/vx_synth.c) unless it says why it has none; every row a table holds
 * points back at a family the names find. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <string.h>

#include "model/md_family.h"
#include "vindex/vx_family.h"
#include "vindex/vx_hf_internal.h"
#include "vindex/vx_synth.h"

/* Appends one line to a report (cut at its size). */
static void note(char *report, size_t cap, const char *fmt, const char *arch, const char *what) {
    size_t len = strlen(report);
    snprintf(report + len, cap - len, fmt, arch, what);
}

/* One optional table: a family has a row there, or says why not; never both, never neither. */
static void check_optional(char *report, size_t cap, const char *arch, bool has_row,
                           const char *why_not, const char *table) {
    if (!has_row && !why_not)
        note(report, cap, "  %s: no row in %s, and no reason why not\n", arch, table);
    if (has_row && why_not)
        note(report, cap, "  %s: a row in %s, yet a reason for having none\n", arch, table);
}

static void test_every_family_has_its_rows(void **state) {
    (void)state;
    char report[2048] = "";
    for (int i = 0; i < VX_FAMILY_COUNT; i++) {
        const vx_family *f = &vx_families[i];
        assert_non_null(f->arch);
        if (!md_family_of(f))
            note(report, sizeof report, "  %s: no row in %s\n", f->arch, "model/md_family.c");
        check_optional(report, sizeof report, f->arch, vx__hf_family_of(f) != NULL, f->no_hf,
                       "vindex/vx_hf_families.c");
        check_optional(report, sizeof report, f->arch, vx_synth_has_family(f), f->no_synth,
                       "vindex/vx_synth.c");
    }
    if (report[0]) fail_msg("the family tables disagree:\n%s", report);
}

/* Every family is found by its name, and the rows found by name are the rows of that family. */
static void test_names_find_the_rows(void **state) {
    (void)state;
    for (int i = 0; i < VX_FAMILY_COUNT; i++) {
        const vx_family *f = &vx_families[i];
        assert_ptr_equal(vx_family_find(f->arch), f);
        for (int j = 0; j < i; j++) assert_string_not_equal(vx_families[j].arch, f->arch);
        const md_family *md = md_family_find(f->arch);
        assert_ptr_equal(md, md_family_of(f));
        if (md) assert_ptr_equal(md->family, f);
        const vx__hf_family *hf = vx__hf_family_of(f);
        for (int k = 0; hf && k < VX__HF_TYPES && hf->model_types[k]; k++)
            assert_ptr_equal(vx__hf_family_find(hf->model_types[k]), hf);
    }
    assert_null(vx_family_find("llama"));
    assert_null(md_family_find("llama"));
    assert_null(vx_family_find(NULL));
}

/* The rows each table lists by name all belong to families of vx_family.c. */
static void test_rows_belong_to_families(void **state) {
    (void)state;
    char buf[512];
    char *save = NULL;
    snprintf(buf, sizeof buf, "%s", vx__hf_family_names());
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        const vx__hf_family *hf = vx__hf_family_find(t);
        assert_non_null(hf);
        assert_non_null(hf->family);
        assert_ptr_equal(vx_family_find(hf->family->arch), hf->family);
    }
    vx_synth_family_names(buf, sizeof buf, ",");
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const vx_family *f = vx_family_find(t);
        assert_non_null(f);
        assert_true(vx_synth_has_family(f));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family_has_its_rows),
        cmocka_unit_test(test_names_find_the_rows),
        cmocka_unit_test(test_rows_belong_to_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
