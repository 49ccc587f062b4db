/// @file fresh_memory.hpp
/// @brief An allocator for large arrays that are filled by many threads:
///        zeroed memory from `calloc` (or, from 4 MiB, a mapping of its
///        own), elements default-initialised.
///
/// `std::vector<T, FreshAllocator<T>>` grows without writing its new
/// elements. Where the vector grows into fresh memory (an empty vector of no
/// capacity resized, or a reallocation) those elements read as zero bits,
/// because `calloc` and a new mapping hand out zeroed memory; for the large arrays of an
/// ensemble or a results table that memory comes straight from the kernel,
/// so the pages are touched first where the elements are first written,
/// by the threads that fill them, instead of once more by a serial zero
/// fill. Memory the vector used before (a resize after a shrink, or within a
/// reserved capacity that was written) keeps whatever it held: code that
/// needs zeros there writes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace ukb {

namespace detail {
/// Arrays of at least this many bytes are mapped on their own, from a 2 MiB
/// boundary, with the kernel asked for huge pages (transparent huge pages,
/// where the system has them on `madvise`): their first touch then takes
/// one page fault per 2 MiB instead of one per 4 KiB, which for the tables
/// of large runs was a large part of making their rows. Not under
/// AddressSanitizer, which checks the bounds of calloc's memory only.
inline constexpr std::size_t huge_fresh_bytes = std::size_t{4} << 20;
inline constexpr std::size_t huge_page = std::size_t{2} << 20;

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
inline constexpr bool huge_fresh_on = true;
#else
inline constexpr bool huge_fresh_on = false;
#endif

/// Zeroed memory of `bytes` from a 2 MiB boundary, the kernel advised to
/// back it with huge pages, for at least huge_fresh_bytes (std::bad_alloc
/// where it cannot be mapped); null for fewer bytes (calloc's then).
inline void* huge_fresh(std::size_t bytes) {
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
  if (bytes < huge_fresh_bytes) return nullptr;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t size = (bytes + page - 1) / page * page;
  void* base = ::mmap(nullptr, size + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  // The mapping's head before the boundary and its tail after `size` go back.
  const auto at = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t from = (at + huge_page - 1) / huge_page * huge_page;
  if (from > at) ::munmap(base, from - at);
  if (at + huge_page > from) ::munmap(reinterpret_cast<void*>(from + size), at + huge_page - from);
  ::madvise(reinterpret_cast<void*>(from), size, MADV_HUGEPAGE);  // advice: 4 KiB pages where not taken
  return reinterpret_cast<void*>(from);
#else
  (void)bytes;
  return nullptr;
#endif
}

/// Unmaps what huge_fresh(bytes) gave; false where it gives nothing (the
/// memory is calloc's).
inline bool free_huge(void* p, std::size_t bytes) noexcept {
  if (!huge_fresh_on || bytes < huge_fresh_bytes) return false;
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
  ::munmap(p, bytes);
#else
  (void)p;
#endif
  return true;
}
}  // namespace detail

/// See the file's documentation. Only for trivially copyable T (zero bits
/// are its zero value: integers and IEEE floating point).
template <class T>
struct FreshAllocator {
  static_assert(std::is_trivially_copyable_v<T>, "FreshAllocator: for plain numbers only");
  using value_type = T;

  FreshAllocator() = default;
  template <class U>
  constexpr FreshAllocator(const FreshAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n == 0) n = 1;
    if (n > std::size_t(-1) / 2 / sizeof(T)) throw std::bad_alloc();
    if (void* p = detail::huge_fresh(n * sizeof(T))) return static_cast<T*>(p);
    void* p = std::calloc(n, sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 0) n = 1;
    if (!detail::free_huge(p, n * sizeof(T))) std::free(p);
  }

  /// No write and no new object: the value-initialisation of `resize(n)`
  /// and `vector(n)` would write every element. T is an implicit-lifetime
  /// type (trivially copyable, a number), so the memory that `calloc` hands
  /// out already holds its objects, with the values of its bytes (zero bits
  /// where fresh).
  template <class U>
  void construct(U*) noexcept {}
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(static_cast<A&&>(a)...);
  }

  template <class U>
  friend constexpr bool operator==(const FreshAllocator&, const FreshAllocator<U>&) noexcept {
    return true;
  }
};

}  // namespace ukb
