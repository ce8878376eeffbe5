// Host storage of a tensor's elements in their own storage format, addressed by element index:
// the K/V caches of test cases (16-bit floats today; the codes of a quantized format later), so
// nothing in the test code assumes 2-byte elements.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/formats.hpp"
#include "testing/random_fill.hpp"

namespace splitkv::testing {

class ElementBuffer {
 public:
  ElementBuffer() = default;
  ElementBuffer(DType dtype, size_t elements)
      : dtype_(dtype), elements_(elements), bytes_((elements * detail::element_traits(dtype).bits + 7) / 8) {}

  DType dtype() const { return dtype_; }
  size_t size() const { return elements_; }
  size_t byte_size() const { return bytes_.size(); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  bool operator==(const ElementBuffer& other) const { return dtype_ == other.dtype_ && bytes_ == other.bytes_; }

  // Standard normal values times `scale`, rounded to the element type (16-bit floats).
  void fill_normal(std::mt19937_64& rng, float scale = 1.f) {
    fill_normal_chunks(int64_t(elements_), rng, scale,
                       [&](int64_t i, float x) { set16(size_t(i), detail::float_to_half_bits(x, dtype_)); });
  }
  // NaN in elements [first, first + count): what no kernel may let through.
  void fill_nan(size_t first, size_t count) {
    for (size_t i = first; i < first + count; ++i) set16(i, nan_bits(dtype_));
  }
  // The byte holding element i (for 4-bit elements, two share a byte: 2j low nibble, 2j+1 high).
  uint8_t* byte_of(size_t i) { return &bytes_[i * size_t(detail::element_traits(dtype_).bits) / 8]; }
  // Copies `count` elements from `src` (same element type).
  void copy_from(size_t first, const ElementBuffer& src, size_t src_first, size_t count) {
    const size_t bits = size_t(detail::element_traits(dtype_).bits);
    std::memcpy(&bytes_[first * bits / 8], &src.bytes_[src_first * bits / 8], count * bits / 8);
  }

 private:
  void set16(size_t i, uint16_t bits) { std::memcpy(&bytes_[i * 2], &bits, 2); }

  DType dtype_ = DType::kBF16;
  size_t elements_ = 0;
  std::vector<uint8_t> bytes_;
};

}  // namespace splitkv::testing
