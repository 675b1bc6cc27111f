/* volk.h before hkernel.h; the engine's own volk loads Vulkan, the library's private copy too. */
#include <volk.h>
#include <hkernel.h>

int engine_volk_second(void);

int engine_loader_ok(void) { return engine_volk_second() && volkGetInstanceVersion() >= VK_API_VERSION_1_2; }
