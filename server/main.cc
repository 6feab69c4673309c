// gemm-server: the service's executable; everything it does is
// RunServerMain (server_main.h).
#include "server/app/server_main.h"

int main(int argc, char** argv) {
  return gemm::server::RunServerMain(argc, argv);
}
