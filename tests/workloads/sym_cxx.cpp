// SPDX-License-Identifier: MIT
// C++ library for the symbolizer tests: a namespaced template method (its
// mangled name is looked up with dlsym) and an always_inline helper inlined
// into it, so demangled DWARF names appear in an inline chain.
namespace gs_test {

static volatile int sink;

template <typename T> struct Widget {
	__attribute__((noinline)) T compute(T x);
};

static inline __attribute__((always_inline)) int helper(int x)
{
	sink = x;
	return sink * 7;
}

template <typename T> T Widget<T>::compute(T x)
{
	return helper(x) + 1;
}

template struct Widget<int>;

} // namespace gs_test

extern "C" int gs_cxx_entry(int x)
{
	gs_test::Widget<int> w;
	return w.compute(x);
}
