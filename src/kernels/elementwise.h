/* Internal interface of the elementwise family for another family: hk_matvec_int8_glu takes
 * hk_swiglu's activation modes. */
#ifndef HK_ELEMENTWISE_H
#define HK_ELEMENTWISE_H

#include "family.h"

/* HK_OK where mode is an hk_glu_mode, else HK_ERROR_INVALID_ARGUMENT reported as fn's. */
hk_status hk__check_glu_mode(const char *fn, hk_glu_mode mode);

#endif
