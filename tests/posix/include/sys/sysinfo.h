/* tests/posix/include/sys/sysinfo.h — found first by `make posix-check`: a Linux-only header, which a
 * Mac does not have. Linux-only calls belong in util/mw_platform.c. */
#error "<sys/sysinfo.h> is Linux-only: put the call behind util/mw_platform.h"
