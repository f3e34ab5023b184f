/* test-no-symbol.c - a shared object without lp_sampler_plugin_get, for
 * the loader test. */
__attribute__((visibility("default"))) int lp_not_a_sampler_plugin(void)
{
    return 1;
}
