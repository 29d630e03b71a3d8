/* template/jj_builtin_names.c — the names of the builtin filters and tests, which the tests
 * "filter" and "test" look up (the filter and test tables dispatch on the same names). */
#include <string.h>

#include "template/jj_internal.h"

static const char *const FILTERS[] = {
    "tojson",     "default",    "d",           "length",  "count",     "trim",   "upper",
    "lower",      "title",      "capitalize",  "replace", "string",    "int",    "float",
    "abs",        "round",      "indent",      "center",  "wordcount", "format", "attr",
    "escape",     "e",          "forceescape", "safe",    "map",       "select", "reject",
    "selectattr", "rejectattr", "unique",      "sort",    "dictsort",  "items",  "sum",
    "min",        "max",        "reverse",     "join",    "first",     "last",   "list",
    "batch",      NULL};

bool jj__has_filter(const char *name) {
    for (int k = 0; FILTERS[k]; k++)
        if (!strcmp(FILTERS[k], name)) return true;
    return false;
}

static const char *const TESTS[] = {
    "defined", "undefined", "none",    "boolean",     "false",    "true",     "integer",  "float",
    "number",  "string",    "mapping", "iterable",    "sequence", "callable", "sameas",   "escaped",
    "in",      "odd",       "even",    "divisibleby", "lower",    "upper",    "filter",   "test",
    "eq",      "equalto",   "==",      "ne",          "!=",       "lt",       "lessthan", "<",
    "le",      "<=",        "gt",      "greaterthan", ">",        "ge",       ">=",       NULL};

bool jj__has_test(const char *name) {
    for (int k = 0; TESTS[k]; k++)
        if (!strcmp(TESTS[k], name)) return true;
    return false;
}
