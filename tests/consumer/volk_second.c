/* hkernel.h before volk.h: compiles where the engine defines VK_NO_PROTOTYPES (hkernel.h says so). */
#include <hkernel.h>
#include <volk.h>

int engine_volk_second(void);
int engine_volk_second(void) { return volkInitialize() == VK_SUCCESS; }
