// The tasks llama-perplexity scores when asked for fewer than a file holds, drawn exactly as
// tools/perplexity/perplexity.cpp draws them (std::mt19937 seeded with 1): hellaswag_score's
// std::uniform_int_distribution over the tasks left, winogrande_score's and multiple_choice_score's
// float-scaled draws. Built and run by perplexity-task-goldens.ts; prints the file indices in order.
//
//   perplexity-task-selection hellaswag|sampled AVAILABLE COUNT
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s hellaswag|sampled AVAILABLE COUNT\n", argv[0]);
        return 1;
    }
    const std::string kind = argv[1];
    const size_t available = std::strtoul(argv[2], nullptr, 10);
    const size_t count = std::strtoul(argv[3], nullptr, 10);
    std::mt19937 rng(1);
    if (kind == "hellaswag") {
        std::vector<size_t> left;
        for (size_t i = 0; i < available; ++i) left.push_back(i);
        for (size_t i = 0; i < std::min(count, available); ++i) {
            std::uniform_int_distribution<size_t> dist(0, left.size() - 1);
            const size_t at = dist(rng);
            printf("%zu\n", left[at]);
            left.erase(left.begin() + at);
        }
    } else {
        std::vector<int> aux(available);
        for (size_t i = 0; i < available; ++i) aux[i] = int(i);
        const float scale = 1/(1.f + (float)rng.max());
        for (size_t i = 0; i < count && i < available; ++i) {
            const int j = int(scale*rng()*aux.size());
            printf("%d\n", aux[j]);
            aux[j] = aux.back();
            aux.pop_back();
        }
    }
    return 0;
}
