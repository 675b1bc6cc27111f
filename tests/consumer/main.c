/* An engine's build of libhkernel as installed: find_package(hkernel) and pkg-config. */
#include <hkernel.h>
#include <stdio.h>

int main(void)
{
    hk_context *ctx = NULL;
    if (hk_context_create(NULL, &ctx) != HK_OK) {
        printf("FAIL: %s\n", hk_last_error());
        return 1;
    }
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    printf("consumer: %s\n", caps.device_name);
    hk_context_destroy(ctx);
    return 0;
}
