/* Must NOT compile (tests/install_test.sh): hkernel.h before volk.h without VK_NO_PROTOTYPES stops
 * at volk's own #error, which says what to do. */
#include <hkernel.h>
#include <volk.h>
