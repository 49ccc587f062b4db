/// @file fresh_memory.hpp
/// @brief An allocator for large arrays that are filled by many threads:
///        memory from `calloc`, elements default-initialised.
///
/// `std::vector<T, FreshAllocator<T>>` grows without writing its new
/// elements. Where the vector grows into fresh memory (an empty vector of no
/// capacity resized, or a reallocation) those elements read as zero bits,
/// because `calloc` hands out zeroed memory; for the large arrays of an
/// ensemble or a results table that memory comes straight from the kernel,
/// so the pages are touched first where the elements are first written,
/// by the threads that fill them, instead of once more by a serial zero
/// fill. Memory the vector used before (a resize after a shrink, or within a
/// reserved capacity that was written) keeps whatever it held: code that
/// needs zeros there writes them.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>

namespace ukb {

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
    void* p = std::calloc(n, sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) noexcept { std::free(p); }

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
