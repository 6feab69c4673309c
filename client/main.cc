// gemm-client: the command line of gemm-service; everything it does is
// RunClientMain (client/cli/client_main.h).
#include "client/cli/client_main.h"

int main(int argc, char** argv) {
  return gemm::client::RunClientMain(argc, argv);
}
