// The columns a paged cache's block table must have: the pages of the longest sequence
// (ceil(max_kv_len / page_size)), at least one. One spelling for validation's rule on block_table
// and the mixed route's copies of it, which its decode parts pass on as their own block tables.
#pragma once

#include <cstdint>

namespace splitkv::detail {

inline int64_t block_table_pages(int64_t max_kv_len, int64_t page_size) {
  const int64_t pages = page_size > 0 ? (max_kv_len + page_size - 1) / page_size : 0;
  return pages > 1 ? pages : 1;
}

}  // namespace splitkv::detail
