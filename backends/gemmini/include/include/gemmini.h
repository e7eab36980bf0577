/* Lets programs written as `#include "include/gemmini.h"` find Autocomp's gemmini.h. */
#include "../gemmini.h"
