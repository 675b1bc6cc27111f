/* An engine that calls Vulkan through libvulkan's prototypes, hkernel.h included first. */
#include <hkernel.h>
#include <vulkan/vulkan.h>

int engine_loader_ok(void)
{
    uint32_t version = 0;
    return vkEnumerateInstanceVersion(&version) == VK_SUCCESS && version >= VK_API_VERSION_1_2;
}
