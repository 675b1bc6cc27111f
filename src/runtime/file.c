/* Reading a whole cache file (the pipeline cache, the tuner's winners) so that nothing at its path
 * can hang or spin the library: it is opened without blocking (a FIFO with no writer) and without
 * following a symbolic link, only a regular file is read, and at most max_bytes of it. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

hk_file_status hk__read_file(const char *path, uint64_t max_bytes, char **out_data, size_t *out_size, int *out_err)
{
    *out_data = NULL;
    *out_size = 0;
    *out_err = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        *out_err = errno;
        return errno == ENOENT ? HK_FILE_ABSENT : errno == ELOOP ? HK_FILE_LINK : HK_FILE_ERROR;
    }
    struct stat st;
    hk_file_status status = HK_FILE_ERROR;
    char *data;
    if (fstat(fd, &st) != 0) {
        *out_err = errno;
    } else if (!S_ISREG(st.st_mode)) {
        status = HK_FILE_NOT_REGULAR;
    } else if ((uint64_t)st.st_size > max_bytes || (uint64_t)st.st_size >= SIZE_MAX) {
        status = HK_FILE_TOO_LARGE;
    } else if ((data = malloc((size_t)st.st_size + 1)) == NULL) {
        *out_err = ENOMEM;
    } else {
        /* at most the size fstat saw: a file that grows meanwhile is read no further, one that
         * shrinks gives what it holds */
        size_t size = (size_t)st.st_size, done = 0;
        while (done < size) {
            ssize_t n = read(fd, data + done, size - done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                *out_err = errno;
            if (n <= 0)
                break;
            done += (size_t)n;
        }
        if (*out_err) {
            free(data);
        } else {
            data[done] = '\0';
            *out_data = data;
            *out_size = done;
            status = HK_FILE_READ;
        }
    }
    close(fd);
    return status;
}
