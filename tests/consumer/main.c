/* An engine's build of libhkernel as installed: find_package(hkernel) and pkg-config. */
#include <hkernel.h>
#include <stdio.h>

int engine_loader_ok(void); /* prototypes.c, or volk_first.c / volk_second.c */

int main(void)
{
    if (hk_version() != HK_VERSION) {
        printf("FAIL: header %d.%d.%d, library %u.%u.%u\n", HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH,
               HK_VERSION_GET_MAJOR(hk_version()), HK_VERSION_GET_MINOR(hk_version()), HK_VERSION_GET_PATCH(hk_version()));
        return 1;
    }
    if (!engine_loader_ok()) {
        printf("FAIL: the engine's own Vulkan loading\n");
        return 1;
    }
    hk_context *ctx = NULL;
    if (hk_context_create(NULL, &ctx) != HK_OK) {
        printf("FAIL: %s\n", hk_last_error());
        return 1;
    }
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    printf("consumer: libhkernel %u.%u.%u on %s\n", HK_VERSION_GET_MAJOR(hk_version()), HK_VERSION_GET_MINOR(hk_version()),
           HK_VERSION_GET_PATCH(hk_version()), caps.device_name);
    hk_context_destroy(ctx);
    return 0;
}
