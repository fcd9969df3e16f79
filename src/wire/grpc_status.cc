#include "wire/grpc_status.h"
