/* tests/posix/include/sys/prctl.h — found first by `make posix-check`: a Linux-only header, which a
 * Mac does not have. Linux-only calls belong in util/mw_platform.c. */
#error "<sys/prctl.h> is Linux-only: put the call behind util/mw_platform.h"
